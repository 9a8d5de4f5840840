export { pythonBackend, type PythonBackend } from './backend.js';
export type { ModelCaller } from './bls.js';
