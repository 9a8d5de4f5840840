import { InvalidArgError, NotFoundError } from '../core/errors.js';
import { bytesToStrings } from './tensors.js';
import type { ClientParameters, OutputTensor } from './types.js';

/** An inference response, from either protocol: model, version, id, parameters and the outputs as typed arrays. */
export class InferResult {
  /** Model that answered. */
  readonly model: string;
  /** Version that answered. */
  readonly version: string;
  /** The request id, when the request had one. */
  readonly id: string | undefined;
  /** Response parameters. */
  readonly parameters: ClientParameters;
  /** Outputs in the server's order. */
  readonly outputs: readonly OutputTensor[];

  /** Built by the clients; not meant to be constructed by callers. */
  constructor(init: {
    model: string;
    version: string;
    id?: string;
    parameters?: ClientParameters;
    outputs: OutputTensor[];
  }) {
    this.model = init.model;
    this.version = init.version;
    this.id = init.id === '' ? undefined : init.id;
    this.parameters = init.parameters ?? {};
    this.outputs = Object.freeze(init.outputs);
  }

  /** The output called `name`; throws NotFoundError naming the outputs there are. */
  output(name: string): OutputTensor {
    const t = this.outputs.find((o) => o.name === name);
    if (t === undefined) {
      throw new NotFoundError(
        `the response has no output '${name}'; it has ${this.outputs.map((o) => `'${o.name}'`).join(', ') || 'none'}`,
      );
    }
    return t;
  }

  /** A BYTES output's elements as text (UTF-8), e.g. classification results `"0.9:3:cat"`. */
  strings(name: string): string[] {
    const t = this.output(name);
    if (!Array.isArray(t.data)) throw new InvalidArgError(`output '${name}' is ${t.datatype}, not BYTES`);
    return bytesToStrings(t.data);
  }
}
