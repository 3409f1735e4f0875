// Preloaded with `node --require` by tests: makes the packages named in
// MHSA_TEST_HIDE_MODULES (comma-separated) fail to resolve, as if not installed.
'use strict';
const Module = require('node:module');

const hidden = new Set((process.env.MHSA_TEST_HIDE_MODULES || '').split(',').filter(Boolean));
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (hidden.has(request)) {
    const error = new Error(`Cannot find module '${request}' (hidden by test/helpers/hide-modules.js)`);
    error.code = 'MODULE_NOT_FOUND';
    throw error;
  }
  return resolve.call(this, request, ...rest);
};
