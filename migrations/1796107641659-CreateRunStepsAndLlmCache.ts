import { MigrationInterface, QueryRunner } from 'typeorm';

// Generated from RunStepEntity, RunValueEntity and LlmCacheEntryEntity by `typeorm migration:generate`,
// then renamed; constraint and index names are set by hand on the entities. The step journal and
// values of a run (written only by the attempt holding its fencing token) and the LLM answer cache.

export class CreateRunStepsAndLlmCache1796107641659 implements MigrationInterface {
  name = 'CreateRunStepsAndLlmCache1796107641659';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "llm_cache_entries" ("scope" text NOT NULL, "request_hash" text NOT NULL, "provider" text NOT NULL, "path" text NOT NULL, "status" integer NOT NULL, "content_type" text, "body" bytea NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "expires_at" TIMESTAMP WITH TIME ZONE NOT NULL, CONSTRAINT "pk_llm_cache_entries" PRIMARY KEY ("scope", "request_hash"))`,
    );
    await queryRunner.query(`CREATE INDEX "ix_llm_cache_entries_expires" ON "llm_cache_entries"  ("expires_at") `);
    await queryRunner.query(
      `CREATE TABLE "run_steps" ("id" BIGSERIAL NOT NULL, "run_id" uuid NOT NULL, "name" text NOT NULL, "status" text NOT NULL, "attempt" integer NOT NULL, "fencing_token" bigint NOT NULL, "starts" integer NOT NULL DEFAULT '1', "exit_code" integer, "output" bytea, "output_bytes" integer NOT NULL DEFAULT '0', "started_at" TIMESTAMP WITH TIME ZONE NOT NULL, "finished_at" TIMESTAMP WITH TIME ZONE, CONSTRAINT "uq_run_steps_run_name" UNIQUE ("run_id", "name"), CONSTRAINT "ck_run_steps_name" CHECK ("name" ~ '^[A-Za-z0-9._:-]{1,128}$'), CONSTRAINT "ck_run_steps_status" CHECK ("status" IN ('STARTED','DONE')), CONSTRAINT "pk_run_steps" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(
      `CREATE TABLE "run_values" ("run_id" uuid NOT NULL, "key" text NOT NULL, "value" bytea NOT NULL, "fencing_token" bigint NOT NULL, "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "ck_run_values_key" CHECK ("key" ~ '^[A-Za-z0-9._:-]{1,128}$'), CONSTRAINT "pk_run_values" PRIMARY KEY ("run_id", "key"))`,
    );
    await queryRunner.query(
      `ALTER TABLE "run_steps" ADD CONSTRAINT "fk_run_steps_run" FOREIGN KEY ("run_id") REFERENCES "runs"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "run_values" ADD CONSTRAINT "fk_run_values_run" FOREIGN KEY ("run_id") REFERENCES "runs"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "run_values" DROP CONSTRAINT "fk_run_values_run"`);
    await queryRunner.query(`ALTER TABLE "run_steps" DROP CONSTRAINT "fk_run_steps_run"`);
    await queryRunner.query(`DROP TABLE "run_values"`);
    await queryRunner.query(`DROP TABLE "run_steps"`);
    await queryRunner.query(`DROP INDEX "public"."ix_llm_cache_entries_expires"`);
    await queryRunner.query(`DROP TABLE "llm_cache_entries"`);
  }
}
