export { ChildProcessHost, type ChildOptions, type ServiceHandler } from './child.js';
export { ProcessInstance, type ProcessInstanceOptions } from './instance.js';
export type { ShmOptions } from './shm.js';
