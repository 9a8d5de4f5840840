import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgError } from '../core/errors.js';
import { formatConfigError } from './config-error.js';
import { ENSEMBLE, EVERYTHING, SEQUENCE, SEQUENCE_OLDEST } from './fixtures.test-data.js';
import type { ModelConfig } from './model-config.js';
import { parseModelConfig } from './text-parser.js';
import { printModelConfig } from './text-printer.js';

function parseClean(text: string): ModelConfig {
  const { config, errors } = parseModelConfig(text, 'config.pbtxt');
  assert.deepEqual(errors.map(formatConfigError), []);
  return config;
}

describe('printModelConfig', () => {
  for (const [title, text] of Object.entries({ EVERYTHING, SEQUENCE, SEQUENCE_OLDEST, ENSEMBLE })) {
    it(`round-trips print -> parse for ${title}`, () => {
      const config = parseClean(text);
      const printed = printModelConfig(config);
      assert.deepEqual(parseClean(printed), config);
      assert.equal(printModelConfig(parseClean(printed)), printed);
    });
  }

  it('prints canonical text: field-number order, two-space indent, lists for repeated scalars', () => {
    const config = parseClean(
      'input { dims: [16] name: "INPUT0" data_type: TYPE_INT32 reshape { shape: [] } }\nmax_batch_size: 8\nname: "simple"\nparameters { key: "k" value { string_value: "v" } }\nversion_policy { all {} }',
    );
    assert.equal(
      printModelConfig(config),
      [
        'name: "simple"',
        'version_policy {',
        '  all {}',
        '}',
        'max_batch_size: 8',
        'input {',
        '  name: "INPUT0"',
        '  data_type: TYPE_INT32',
        '  dims: [16]',
        '  reshape {',
        '    shape: []',
        '  }',
        '}',
        'parameters {',
        '  key: "k"',
        '  value {',
        '    string_value: "v"',
        '  }',
        '}',
        '',
      ].join('\n'),
    );
  });

  it('escapes strings and prints special floats so they re-parse', () => {
    const config: ModelConfig = { name: 'a"b\\c\n\u0001é' };
    assert.equal(printModelConfig(config), 'name: "a\\"b\\\\c\\n\\001é"\n');
    assert.deepEqual(parseClean(printModelConfig(config)), config);
    const floats = {
      model_metrics: { metric_control: [{ histogram_options: { buckets: [NaN, -Infinity, 1e-7, 1e21] } }] },
    };
    assert.deepEqual(parseClean(printModelConfig(floats)), floats);
  });

  it('prints nothing for an empty config', () => {
    assert.equal(printModelConfig({}), '');
  });

  it('BAD CALL - rejects a field the schema does not have', () => {
    assert.throws(
      () => printModelConfig({ input: [{ name: 'x', dimz: [1] } as never] }),
      (err: unknown) => {
        return (
          err instanceof InvalidArgError &&
          /unknown field 'dimz' in ModelInput; did you mean 'dims'\?/.test(err.message)
        );
      },
    );
  });

  it('BAD CALL - rejects a value of the wrong type', () => {
    assert.throws(
      () => printModelConfig({ max_batch_size: 1.5 }),
      /ModelConfig.max_batch_size: expected an integer, got 1.5/,
    );
    assert.throws(() => printModelConfig({ input: [{ data_type: 'TYPE_NOPE' as never }] }), /expected a DataType name/);
  });
});
