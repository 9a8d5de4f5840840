export { identityBackend } from './backend.js';
