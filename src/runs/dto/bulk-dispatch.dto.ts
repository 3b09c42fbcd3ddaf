import { ApiProperty } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import {
  isUUID,
  Validate,
  ValidationArguments,
  ValidatorConstraint,
  ValidatorConstraintInterface,
} from 'class-validator';

export const BULK_DISPATCH_MAX = 100;

/** What is wrong with a list of run ids, in one sentence; null when nothing is. */
export function runIdListProblem(value: unknown): string | null {
  if (!Array.isArray(value)) return 'runIds must be an array of run ids';
  if (value.length === 0) return 'runIds must list at least one run id';
  if (value.length > BULK_DISPATCH_MAX)
    return `runIds may list at most ${BULK_DISPATCH_MAX} run ids (got ${value.length})`;
  const seen = new Set<string>();
  for (const [i, id] of value.entries()) {
    if (typeof id !== 'string' || !isUUID(id)) return `runIds[${i}] is not a UUID`;
    if (seen.has(id)) return `runIds lists ${id} more than once`;
    seen.add(id);
  }
  return null;
}

// One rule, so a bad list gets one sentence (class-validator's five array rules would all answer a non-array).
@ValidatorConstraint({ name: 'runIdList' })
class RunIdList implements ValidatorConstraintInterface {
  validate(value: unknown): boolean {
    return runIdListProblem(value) === null;
  }
  defaultMessage(args: ValidationArguments): string {
    return runIdListProblem(args.value) ?? 'runIds is invalid';
  }
}

export class BulkDispatchDto {
  @ApiProperty({
    type: 'array',
    items: { type: 'string', format: 'uuid' },
    minItems: 1,
    maxItems: BULK_DISPATCH_MAX,
    uniqueItems: true,
    description: 'The runs to queue, each once',
  })
  // Postgres reads a UUID in any case and answers in lower case: ids are compared, guarded and
  // answered as it spells them, so one run in two spellings is a duplicate.
  @Transform(({ value }: { value: unknown }) =>
    Array.isArray(value) ? value.map((v: unknown) => (typeof v === 'string' ? v.toLowerCase() : v)) : value,
  )
  @Validate(RunIdList)
  runIds: string[];
}
