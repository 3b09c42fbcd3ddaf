export const REDIS_CLIENT = Symbol('REDIS_CLIENT');
export const LOCK_SERVICE = Symbol('LOCK_SERVICE');
