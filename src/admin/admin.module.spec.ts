import { AdminModule } from './admin.module';

describe('AdminModule.register', () => {
  it.each(['api', 'all'] as const)('mounts Bull Board for role %s', (role) => {
    expect(AdminModule.register(role).imports?.length).toBeGreaterThan(0);
  });
  it.each(['worker', 'scheduler'] as const)('mounts nothing for role %s', (role) => {
    expect(AdminModule.register(role).imports ?? []).toHaveLength(0);
  });
});
