import { MigrationInterface, QueryRunner } from 'typeorm';

// Generated from the entities by `npm run migration:generate`, then renamed; constraint names are
// set by hand on the entities (see STYLE: named constraints). Projects, tasks, runs, their events,
// idempotency keys and the notification outbox.

export class CreateCoreSchema1764400000000 implements MigrationInterface {
  name = 'CreateCoreSchema1764400000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "notification_logs" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "run_id" uuid NOT NULL, "event_type" text NOT NULL, "channel" text NOT NULL, "status" text NOT NULL DEFAULT 'PENDING', "message" jsonb NOT NULL, "attempts" integer NOT NULL DEFAULT '0', "next_attempt_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "claimed_until" TIMESTAMP WITH TIME ZONE, "last_error" text, "sent_at" TIMESTAMP WITH TIME ZONE, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "uq_notification_logs_run_event" UNIQUE ("run_id", "event_type", "channel"), CONSTRAINT "ck_notification_logs_status" CHECK ("status" IN ('PENDING','SENT','FAILED','SKIPPED')), CONSTRAINT "pk_notification_logs" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "ix_notification_logs_due" ON "notification_logs"  ("status", "next_attempt_at") `,
    );
    await queryRunner.query(
      `CREATE TABLE "idempotency_keys" ("key" text NOT NULL, "fingerprint" text NOT NULL, "state" text NOT NULL, "response_status" integer, "response_body" jsonb, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "expires_at" TIMESTAMP WITH TIME ZONE NOT NULL, CONSTRAINT "ck_idempotency_keys_state" CHECK ("state" IN ('in_flight','completed')), CONSTRAINT "pk_idempotency_keys" PRIMARY KEY ("key"))`,
    );
    await queryRunner.query(`CREATE INDEX "ix_idempotency_keys_expires" ON "idempotency_keys"  ("expires_at") `);
    await queryRunner.query(
      `CREATE TABLE "projects" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "name" text NOT NULL, "workspace_path" text NOT NULL, "max_concurrent_runs" integer NOT NULL DEFAULT '1', "external_provider" text, "external_id" text, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "uq_projects_name" UNIQUE ("name"), CONSTRAINT "pk_projects" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(
      `CREATE UNIQUE INDEX "ux_projects_external_ref" ON "projects"  ("external_provider", "external_id") WHERE "external_provider" IS NOT NULL AND "external_id" IS NOT NULL`,
    );
    await queryRunner.query(
      `CREATE TABLE "tasks" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "project_id" uuid NOT NULL, "external_provider" text, "external_id" text, "url" text, "title" text NOT NULL, "metadata" jsonb NOT NULL DEFAULT '{}', "status" text NOT NULL DEFAULT 'open', "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "pk_tasks" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(`CREATE INDEX "ix_tasks_project" ON "tasks"  ("project_id") `);
    await queryRunner.query(
      `CREATE UNIQUE INDEX "ux_tasks_external_ref" ON "tasks"  ("external_provider", "external_id") WHERE "external_provider" IS NOT NULL AND "external_id" IS NOT NULL`,
    );
    await queryRunner.query(
      `CREATE TABLE "runs" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "project_id" uuid NOT NULL, "task_id" uuid, "kind" text NOT NULL DEFAULT 'manual', "requirement" text NOT NULL, "status" text NOT NULL DEFAULT 'PENDING', "attempts" integer NOT NULL DEFAULT '0', "fencing_token" bigint NOT NULL DEFAULT '0', "lease_owner" text, "lease_expires_at" TIMESTAMP WITH TIME ZONE, "dispatch_generation" integer NOT NULL DEFAULT '0', "last_error" text, "output_tail" text, "started_at" TIMESTAMP WITH TIME ZONE, "finished_at" TIMESTAMP WITH TIME ZONE, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "ck_runs_kind" CHECK ("kind" IN ('manual','authoring')), CONSTRAINT "ck_runs_status" CHECK ("status" IN ('PENDING','QUEUED','RUNNING','RETRYING','SUCCESS','FAILED','CANCELLED')), CONSTRAINT "pk_runs" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(
      `CREATE UNIQUE INDEX "ux_runs_task_authoring" ON "runs"  ("task_id") WHERE "kind" = 'authoring'`,
    );
    await queryRunner.query(`CREATE INDEX "ix_runs_created" ON "runs"  ("created_at", "id") `);
    await queryRunner.query(`CREATE INDEX "ix_runs_status_lease" ON "runs"  ("status", "lease_expires_at") `);
    await queryRunner.query(`CREATE INDEX "ix_runs_project_status" ON "runs"  ("project_id", "status") `);
    await queryRunner.query(
      `CREATE TABLE "run_events" ("id" BIGSERIAL NOT NULL, "run_id" uuid NOT NULL, "from_status" text, "to_status" text NOT NULL, "attempt" integer NOT NULL, "fencing_token" bigint NOT NULL, "worker_id" text, "reason" text, "at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "pk_run_events" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(`CREATE INDEX "ix_run_events_run" ON "run_events"  ("run_id", "id") `);
    await queryRunner.query(
      `ALTER TABLE "tasks" ADD CONSTRAINT "fk_tasks_project" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "runs" ADD CONSTRAINT "fk_runs_project" FOREIGN KEY ("project_id") REFERENCES "projects"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "runs" ADD CONSTRAINT "fk_runs_task" FOREIGN KEY ("task_id") REFERENCES "tasks"("id") ON DELETE SET NULL ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "run_events" ADD CONSTRAINT "fk_run_events_run" FOREIGN KEY ("run_id") REFERENCES "runs"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "run_events" DROP CONSTRAINT "fk_run_events_run"`);
    await queryRunner.query(`ALTER TABLE "runs" DROP CONSTRAINT "fk_runs_task"`);
    await queryRunner.query(`ALTER TABLE "runs" DROP CONSTRAINT "fk_runs_project"`);
    await queryRunner.query(`ALTER TABLE "tasks" DROP CONSTRAINT "fk_tasks_project"`);
    await queryRunner.query(`DROP INDEX "public"."ix_run_events_run"`);
    await queryRunner.query(`DROP TABLE "run_events"`);
    await queryRunner.query(`DROP INDEX "public"."ix_runs_project_status"`);
    await queryRunner.query(`DROP INDEX "public"."ix_runs_status_lease"`);
    await queryRunner.query(`DROP INDEX "public"."ix_runs_created"`);
    await queryRunner.query(`DROP INDEX "public"."ux_runs_task_authoring"`);
    await queryRunner.query(`DROP TABLE "runs"`);
    await queryRunner.query(`DROP INDEX "public"."ux_tasks_external_ref"`);
    await queryRunner.query(`DROP INDEX "public"."ix_tasks_project"`);
    await queryRunner.query(`DROP TABLE "tasks"`);
    await queryRunner.query(`DROP INDEX "public"."ux_projects_external_ref"`);
    await queryRunner.query(`DROP TABLE "projects"`);
    await queryRunner.query(`DROP INDEX "public"."ix_idempotency_keys_expires"`);
    await queryRunner.query(`DROP TABLE "idempotency_keys"`);
    await queryRunner.query(`DROP INDEX "public"."ix_notification_logs_due"`);
    await queryRunner.query(`DROP TABLE "notification_logs"`);
  }
}
