import { CheckTransitions } from './check-transitions';

describe('CheckTransitions (readiness log lines)', () => {
  const setup = () => {
    const lines: Array<[string, Record<string, unknown>]> = [];
    const log = new CheckTransitions({
      log: (m: Record<string, unknown>) => void lines.push(['log', m]),
      warn: (m: Record<string, unknown>) => void lines.push(['warn', m]),
    });
    return { log, lines };
  };

  it('logs the first failure with its full error, then nothing until the check recovers', () => {
    const { log, lines } = setup();
    log.up('postgres');
    log.down('postgres', new Error('Connection terminated unexpectedly'), '10.0.0.7:5432');
    log.down('postgres', new Error('connect ECONNREFUSED 10.0.0.7:5432'), '10.0.0.7:5432');
    log.down('postgres', new Error('timed out after 2000 ms'));
    log.up('postgres');
    log.up('postgres');
    expect(lines).toEqual([
      [
        'warn',
        {
          msg: 'readiness check is down',
          check: 'postgres',
          at: '10.0.0.7:5432',
          err: 'Connection terminated unexpectedly',
        },
      ],
      ['log', { msg: 'readiness check is up again', check: 'postgres' }],
    ]);
  });

  it('tracks each check on its own and logs a failure seen at the very first probe', () => {
    const { log, lines } = setup();
    log.down('redis', new Error('boom'));
    log.up('postgres');
    log.down('postgres', 'not an Error');
    expect(lines.map(([, m]) => [m.check, m.err])).toEqual([
      ['redis', 'boom'],
      ['postgres', 'not an Error'],
    ]);
  });

  it('keeps the addresses an AggregateError holds in its parts', () => {
    const { log, lines } = setup();
    log.down(
      'postgres',
      new AggregateError([
        new Error('connect ECONNREFUSED ::1:5432'),
        new Error('connect ECONNREFUSED 127.0.0.1:5432'),
      ]),
    );
    expect(lines[0][1].err).toBe('AggregateError; connect ECONNREFUSED ::1:5432; connect ECONNREFUSED 127.0.0.1:5432');
  });
});
