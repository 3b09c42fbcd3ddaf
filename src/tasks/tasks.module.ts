import { DynamicModule, Module } from '@nestjs/common';
import { AppRole, roleServesApi } from '../config/roles';
import { TaskIntakeService } from './task-intake.service';
import { TasksController } from './tasks.controller';
import { TasksRepository } from './tasks.repository';
import { TasksService } from './tasks.service';

/**
 * Tasks from external work items. `runs` must be the very DynamicModule object the app imports:
 * Nest identifies dynamic modules by reference, so a second `RunsModule.register()` would build a
 * second RunsModule (and a second run processor).
 */
@Module({})
export class TasksModule {
  static register(role: AppRole, runs: DynamicModule): DynamicModule {
    return {
      module: TasksModule,
      imports: [runs],
      providers: [TasksRepository, TasksService, TaskIntakeService],
      controllers: roleServesApi(role) ? [TasksController] : [],
      exports: [TasksService, TaskIntakeService],
    };
  }
}
