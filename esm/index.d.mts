export * from '../dist/lib/index.js';
