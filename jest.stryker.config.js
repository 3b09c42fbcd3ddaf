// Jest as Stryker runs it (see stryker.conf.mjs, which sets testMatch to the tests of the area
// being mutated): the project's config — swc transform, the real Postgres and Redis, a database
// and a Redis prefix per jest run — with a globalSetup that cleans up after killed workers.
const { join } = require('node:path');
const base = require('./jest.config');

module.exports = {
  ...base,
  // stryker.conf.mjs passes testMatch; jest refuses testRegex and testMatch together.
  testRegex: undefined,
  testMatch: ['<rootDir>/src/**/*.spec.ts', '<rootDir>/test/**/*.e2e-spec.ts'],
  // Bail after the first failure and run the fast files first (see both files).
  // Absolute: Stryker loads the environment itself (require.resolve does not know <rootDir>).
  testEnvironment: join(__dirname, 'test/support/stryker-environment.js'),
  testSequencer: join(__dirname, 'test/support/stryker-sequencer.js'),
  globalSetup: '<rootDir>/test/support/stryker-global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
};
