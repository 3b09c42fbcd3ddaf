/**
 * bench/results/latest.svg, drawn by hand from the report (no charting dependency): on the left,
 * runs (jobs) per second of onceflow's guarded runs, bare Bull (alone and under the run lock) and
 * graphile-worker, and of the
 * full path with a forked command against bare Bull forking the same; on the right, where a
 * guarded run's CPU goes (worker, producer, Postgres, Redis). A figure not measured is left out.
 */
import type { BenchReport } from './report';

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const text = (x: number, y: number, s: string, extra = '') =>
  `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}"${extra ? ` ${extra}` : ''}>${esc(s)}</text>`;

export function renderChart(r: BenchReport): string {
  const bars: Array<{ label: string; value: number | null; color: string }> = [
    { label: 'onceflow guarded runs (no-op)', value: r.guardedRunsPerSecOneWorker, color: '#2b7a78' },
    { label: 'bare Bull no-op jobs (no guarantee)', value: r.bareBullJobsPerSec, color: '#9aa5b1' },
    { label: 'bare Bull jobs under the run lock', value: r.bareBullLockedJobsPerSec, color: '#7b8794' },
    { label: 'graphile-worker jobs (mean of 2)', value: r.graphileJobsPerSecMean, color: '#c9803a' },
    { label: 'onceflow full path, fork sh -c true', value: r.fullPathRunsPerSec, color: '#2b7a78' },
    { label: 'bare Bull forking sh -c true', value: r.bareBullForkJobsPerSec, color: '#9aa5b1' },
  ];
  const shown = bars.filter((b) => b.value !== null) as Array<{ label: string; value: number; color: string }>;
  const max = Math.max(1, ...shown.map((b) => b.value));
  const barW = 300;
  const out: string[] = [];
  out.push(text(20, 28, 'runs (jobs) per second, one bench run', 'font-weight="bold"'));
  shown.forEach((b, k) => {
    const y = 48 + k * 38;
    const w = Math.max(1, (b.value / max) * barW);
    out.push(text(20, y + 11, b.label));
    out.push(`<rect x="20" y="${y + 16}" width="${w.toFixed(1)}" height="14" fill="${b.color}"/>`);
    out.push(text(26 + w, y + 28, b.value.toFixed(0)));
  });
  const cpu = r.cpuMsPerGuardedRun;
  const parts: Array<[string, number | null, string]> = cpu
    ? [
        ['worker', cpu.worker, '#2b7a78'],
        ['producer', cpu.producer, '#3aafa9'],
        ['Postgres', cpu.postgres, '#336791'],
        ['Redis', cpu.redis, '#d82c20'],
      ]
    : [];
  const x0 = 440;
  out.push(text(x0, 28, 'CPU ms per guarded run', 'font-weight="bold"'));
  const total = parts.reduce((a, [, v]) => a + (v ?? 0), 0);
  if (total > 0) {
    const h = 200;
    let y = 48;
    for (const [label, v, color] of parts) {
      if (v === null) continue;
      const bh = (v / total) * h;
      out.push(`<rect x="${x0}" y="${y.toFixed(1)}" width="60" height="${bh.toFixed(1)}" fill="${color}"/>`);
      out.push(text(x0 + 70, y + bh / 2 + 4, `${label} ${v.toFixed(2)}`));
      y += bh;
    }
    out.push(text(x0, y + 20, `total ${total.toFixed(2)} ms (target ≤ 1.0)`));
  } else out.push(text(x0, 60, 'not measured'));
  const height = Math.max(48 + shown.length * 38 + 30, 290);
  out.push(
    text(
      20,
      height - 10,
      `${r.date.slice(0, 10)} · ${r.machine.cpuModel}, ${r.machine.cores} cores · load before ${r.machine.loadAverageBefore}`,
      'fill="#666"',
    ),
  );
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="680" height="${height}" viewBox="0 0 680 ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    ...out,
    '</svg>',
    '',
  ].join('\n');
}
