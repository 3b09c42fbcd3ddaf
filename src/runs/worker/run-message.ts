import { escapeSlackText } from '../../notifications/slack-text';
import { RunStatus } from '../run-status';

/** The Slack line of a run that reached SUCCESS or FAILED, rendered when the outbox row is written. */
export function renderText(runId: string, projectName: string, status: RunStatus, requirement: string): string {
  // Cut before escaping, so the 200 characters are the user's and no entity is cut in half.
  const firstLine = (requirement.split(/\r?\n/).find((l) => l.trim()) ?? '').trim().slice(0, 200);
  const icon = status === RunStatus.SUCCESS ? ':white_check_mark:' : ':x:';
  return `${icon} Run ${runId} in project ${escapeSlackText(projectName)}: ${status} — ${escapeSlackText(firstLine)}`;
}
