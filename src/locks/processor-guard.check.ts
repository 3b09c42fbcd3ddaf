import { Injectable, OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';

/** The metadata key @nestjs/bull's @Process() writes (bull.constants: BULL_MODULE_QUEUE_PROCESS). */
const BULL_PROCESS_METADATA = 'bull:module_queue_process';

export class UnguardedProcessorError extends Error {}

/**
 * Boot-time check: a Bull handler registered with a bare @Process() would run without the run
 * lock, so the application refuses to start. Guarded handlers go through TaskLockService.process().
 */
@Injectable()
export class ProcessorGuardCheck implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
  ) {}

  onModuleInit(): void {
    const offenders: string[] = [];
    for (const wrapper of this.discovery.getProviders()) {
      const instance = wrapper.instance as Record<string, unknown> | undefined;
      if (!instance || typeof instance !== 'object') continue;
      const proto = Object.getPrototypeOf(instance);
      if (!proto) continue;
      for (const method of this.scanner.getAllMethodNames(proto)) {
        const fn = proto[method];
        if (typeof fn === 'function' && Reflect.getMetadata(BULL_PROCESS_METADATA, fn) !== undefined) {
          offenders.push(`${proto.constructor?.name ?? '?'}.${method}`);
        }
      }
    }
    if (offenders.length > 0) {
      throw new UnguardedProcessorError(
        `queue processor(s) registered without TaskLockService: ${offenders.join(', ')} — use TaskLockService.process()`,
      );
    }
  }
}
