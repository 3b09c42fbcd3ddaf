import { MigrationInterface, QueryRunner } from 'typeorm';

// Generated from WebhookDeliveryEntity by `typeorm migration:generate`, then renamed; constraint
// and index names are set by hand on the entity. One row per distinct Plane delivery (dedupe key).

export class CreateWebhookDeliveries1795972334867 implements MigrationInterface {
  name = 'CreateWebhookDeliveries1795972334867';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "webhook_deliveries" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "provider" text NOT NULL, "dedupe_key" text NOT NULL, "external_delivery_id" text, "payload_version" text NOT NULL, "event" text NOT NULL, "action" text, "work_item_id" text, "actor_id" text, "status" text NOT NULL DEFAULT 'accepted', "reason" text, "error" text, "task_id" uuid, "run_id" uuid, "payload" jsonb NOT NULL, "duplicate_count" integer NOT NULL DEFAULT '0', "last_duplicate_at" TIMESTAMP WITH TIME ZONE, "process_attempts" integer NOT NULL DEFAULT '0', "received_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "processed_at" TIMESTAMP WITH TIME ZONE, "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "uq_webhook_deliveries_dedupe" UNIQUE ("provider", "dedupe_key"), CONSTRAINT "ck_webhook_deliveries_status" CHECK ("status" IN ('accepted','duplicate','ignored','processed','failed')), CONSTRAINT "pk_webhook_deliveries" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "ix_webhook_deliveries_work_item" ON "webhook_deliveries"  ("provider", "work_item_id") `,
    );
    await queryRunner.query(
      `CREATE INDEX "ix_webhook_deliveries_status" ON "webhook_deliveries"  ("provider", "status", "received_at") `,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."ix_webhook_deliveries_status"`);
    await queryRunner.query(`DROP INDEX "public"."ix_webhook_deliveries_work_item"`);
    await queryRunner.query(`DROP TABLE "webhook_deliveries"`);
  }
}
