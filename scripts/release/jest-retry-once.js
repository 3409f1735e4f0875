// The rehearsal's setup file for jest under wine: a failed test runs once
// more, its first failure printed (RETRY lines), and the rehearsal names it
// in its report. Under an emulation layer on a shared CI machine a test can
// fail for the layer's timing, not the package's; a retry keeps the run
// green only when the test then passes, and the first failure stays on record.
jest.retryTimes(1, { logErrorsBeforeRetry: true });
