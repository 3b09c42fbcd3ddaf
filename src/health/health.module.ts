import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { HealthController } from './health.controller';
import { HealthSnapshot } from './health-snapshot';

// Terminus' own logger writes every failed probe; the controller logs changes of state instead.
@Module({
  imports: [TerminusModule.forRoot({ logger: false })],
  controllers: [HealthController],
  providers: [HealthSnapshot],
})
export class HealthModule {}
