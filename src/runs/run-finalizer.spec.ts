import { renderText } from './run-finalizer';
import { RunStatus } from './run-status';

describe('renderText (the Slack line of a finished run)', () => {
  it('shows the outcome with its icon and the first non-blank line of the requirement, trimmed', () => {
    expect(renderText('r1', 'shop', RunStatus.SUCCESS, '\n   \n  Add a health endpoint  \r\nwith details')).toBe(
      ':white_check_mark: Run r1 in project shop: SUCCESS — Add a health endpoint',
    );
    expect(renderText('r2', 'shop', RunStatus.FAILED, 'one\ntwo')).toBe(':x: Run r2 in project shop: FAILED — one');
  });

  it('cuts the line at 200 characters and copes with a blank requirement', () => {
    expect(renderText('r3', 'p', RunStatus.SUCCESS, `${'a'.repeat(250)}\nb`)).toBe(
      `:white_check_mark: Run r3 in project p: SUCCESS — ${'a'.repeat(200)}`,
    );
    expect(renderText('r4', 'p', RunStatus.FAILED, ' \n ')).toBe(':x: Run r4 in project p: FAILED — ');
  });
});
