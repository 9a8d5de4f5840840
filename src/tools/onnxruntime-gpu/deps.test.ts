import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { missingFromDlerror, parseLdd, remedyFor } from './deps.js';

describe('library dependency diagnosis', () => {
  it('reads the not-found lines of ldd output, once each', () => {
    const out = [
      '\tlinux-vdso.so.1 (0x00007ffd)',
      '\tlibonnxruntime_providers_shared.so => /x/libonnxruntime_providers_shared.so (0x7f)',
      '\tlibcublasLt.so.13 => not found',
      '\tlibcudnn.so.9 => not found',
      '\tlibcudnn.so.9 => not found',
      '\tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x7f)',
    ].join('\n');
    assert.deepEqual(parseLdd(out), ['libcublasLt.so.13', 'libcudnn.so.9']);
  });

  it('reads the soname out of a dlopen error', () => {
    assert.equal(
      missingFromDlerror(
        'Failed to load shared library: libcudnn.so.9: cannot open shared object file: No such file or directory',
      ),
      'libcudnn.so.9',
    );
    assert.equal(missingFromDlerror('undefined symbol: foo'), undefined);
  });

  it('names the CUDA 13 / cuDNN 9 pip package for each library the CUDA provider needs', () => {
    assert.equal(remedyFor('libcudnn.so.9').pip, 'nvidia-cudnn-cu13==9.*');
    assert.equal(remedyFor('libcudnn_graph.so.9').pip, 'nvidia-cudnn-cu13==9.*');
    assert.equal(remedyFor('libcublasLt.so.13').pip, 'nvidia-cublas==13.*');
    assert.equal(remedyFor('libcufft.so.12').pip, 'nvidia-cufft==12.*');
    assert.equal(remedyFor('libcurand.so.10').pip, 'nvidia-curand==10.*');
    assert.equal(remedyFor('libcudart.so.13').pip, 'nvidia-cuda-runtime==13.*');
    assert.equal(remedyFor('libnvinfer.so.10').pip, 'tensorrt-cu13-libs==10.*');
    assert.equal(remedyFor('libcuda.so.1').pip, undefined, 'the driver does not come from pip');
    assert.match(remedyFor('libcuda.so.1').what, /NVIDIA driver/);
    assert.match(remedyFor('libfoo.so.3').what, /no advice/);
  });
});
