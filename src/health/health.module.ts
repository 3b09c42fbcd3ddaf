import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { HealthController } from './health.controller';
import { MaintenanceTasks } from './maintenance.tasks';

// Terminus' own logger writes every failed probe; the controller logs changes of state instead.
@Module({ imports: [TerminusModule.forRoot({ logger: false })], controllers: [HealthController], providers: [MaintenanceTasks] })
export class HealthModule {}
