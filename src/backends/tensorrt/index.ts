export { tensorrtBackend, type TensorRTBackendInit } from './backend.js';
export type { PlanFacts } from './facts.js';
