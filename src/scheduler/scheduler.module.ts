import { Global, Module } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { ScheduledTasks } from './scheduled-tasks.service';

@Global()
@Module({ imports: [ScheduleModule.forRoot()], providers: [ScheduledTasks], exports: [ScheduledTasks] })
export class SchedulerModule {}
