import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      '.probe/**',
      'dist/**',
      'node_modules/**',
      'src/**/generated/**',
      '.device/**',
      'examples/**',
      'bench/results/**',
      '.venv/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-floating-promises': 'off',
      'no-constant-condition': ['error', { checkLoops: false }],
      // TypeScript checks names itself; the core rule does not know Node's globals.
      'no-undef': 'off',
    },
  },
);
