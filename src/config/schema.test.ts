import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import protobuf from 'protobufjs';
import { configType, modelConfigProtoPath, modelConfigType } from './schema.js';

describe('model_config.proto', () => {
  it('is found from the package root and loads as package inference', () => {
    assert.match(modelConfigProtoPath(), /proto[/\\]model_config\.proto$/);
    assert.equal(modelConfigType().fullName, '.inference.ModelConfig');
  });

  it("keeps Triton's field numbers and types for ModelConfig", () => {
    const fields = Object.fromEntries(modelConfigType().fieldsArray.map((f) => [f.name, `${f.id}:${f.type}`]));
    assert.deepEqual(fields, {
      name: '1:string',
      platform: '2:string',
      backend: '17:string',
      runtime: '25:string',
      version_policy: '3:ModelVersionPolicy',
      max_batch_size: '4:int32',
      input: '5:ModelInput',
      output: '6:ModelOutput',
      batch_input: '20:BatchInput',
      batch_output: '21:BatchOutput',
      optimization: '12:ModelOptimizationPolicy',
      dynamic_batching: '11:ModelDynamicBatching',
      sequence_batching: '13:ModelSequenceBatching',
      ensemble_scheduling: '15:ModelEnsembling',
      instance_group: '7:ModelInstanceGroup',
      default_model_filename: '8:string',
      cc_model_filenames: '9:string',
      metric_tags: '10:string',
      parameters: '14:ModelParameter',
      model_warmup: '16:ModelWarmup',
      model_operations: '18:ModelOperations',
      model_transaction_policy: '19:ModelTransactionPolicy',
      model_repository_agents: '23:ModelRepositoryAgents',
      response_cache: '24:ModelResponseCache',
      model_metrics: '26:ModelMetrics',
    });
  });

  it('has every nested message and enum the configs use', () => {
    for (const name of [
      'ModelRateLimiter.Resource',
      'ModelInstanceGroup.SecondaryDevice',
      'ModelVersionPolicy.All',
      'ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound',
      'ModelOptimizationPolicy.ExecutionAccelerators.Accelerator',
      'ModelOptimizationPolicy.PinnedMemoryBuffer',
      'ModelSequenceBatching.InitialState',
      'ModelSequenceBatching.StrategyOldest',
      'ModelEnsembling.Step',
      'ModelWarmup.Input',
      'ModelRepositoryAgents.Agent',
      'ModelMetrics.MetricControl.HistogramOptions',
    ]) {
      assert.ok(configType(name) instanceof protobuf.Type, name);
    }
    const dataType = modelConfigType().root.lookupEnum('inference.DataType');
    assert.equal(dataType.values.TYPE_STRING, 13);
    assert.equal(dataType.values.TYPE_BF16, 14);
  });
});
