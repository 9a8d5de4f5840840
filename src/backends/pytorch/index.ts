export { pytorchBackend, type PyTorchBackendInit } from './backend.js';
