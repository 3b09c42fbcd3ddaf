// The jest environment under Stryker (jest.stryker.config.js): the node environment, plus a bail.
// Stryker's jest-runner forces jest's `bail` off, so a mutant killed in 50 ms by a direct test
// would still wait for every e2e test that covers it (often until a waitFor times out). Here, once
// a test or hook of the run has failed, every later test and test file of the same jest run is
// skipped: the mutant is killed, the rest is not needed. The flag lives in process.env (one jest
// run per Stryker worker at a time, runInBand) and stryker-global-setup.ts clears it per run.
const { TestEnvironment } = require('jest-environment-node');

const FLAG = 'ONCEFLOW_STRYKER_FAILED';

class StrykerBailEnvironment extends TestEnvironment {
  async handleTestEvent(event) {
    // Only while a mutant is active: the initial (dry) run must run everything to measure coverage.
    if (!process.env.__STRYKER_ACTIVE_MUTANT__) return;
    if (event.name === 'test_done' && event.test.errors.length > 0) process.env[FLAG] = '1';
    if (event.name === 'hook_failure') process.env[FLAG] = '1';
    if (process.env[FLAG] !== '1') return;
    if (event.name === 'run_describe_start' && !event.describeBlock.parent) event.describeBlock.mode = 'skip';
    if (event.name === 'test_start') event.test.mode = 'skip';
  }
}

module.exports = StrykerBailEnvironment;
module.exports.FLAG = FLAG;
