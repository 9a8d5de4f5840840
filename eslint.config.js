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
    // Type-aware rules read tsconfig.json's program (src, test, bench) through the project service.
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // A promise nobody awaits or catches loses its rejection (an unhandled rejection ends the process) and
      // hides ordering bugs; dropping one on purpose is written `void p` with a comment saying why.
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          // node:test's describe/it return promises the runner itself tracks; awaiting them would serialize suites.
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite', 'before', 'after'] },
          ],
        },
      ],
      // An async function where a callback's result is ignored (event handlers, forEach) drops its rejection too.
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
    },
  },
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-constant-condition': ['error', { checkLoops: false }],
      // TypeScript checks names itself; the core rule does not know Node's globals.
      'no-undef': 'off',
    },
  },
);
