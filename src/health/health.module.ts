import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { HealthController } from './health.controller';
import { MaintenanceTasks } from './maintenance.tasks';

@Module({ imports: [TerminusModule], controllers: [HealthController], providers: [MaintenanceTasks] })
export class HealthModule {}
