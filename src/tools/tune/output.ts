/**
 * Writes a tune's results: config.pbtxt (when one was chosen), report.md, chart.svg and report.json into the output
 * folder. With `write`, the chosen config also replaces the model's own config.pbtxt, the old one kept beside it as
 * config.pbtxt.before-tune, and the report goes to its tune/ folder (the web console shows it); without it the model
 * folder is never touched.
 */
import { copyFile, mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { TUNE_REPORT_PATH } from '../../console/tune-report.js';
import { chartOf, configText, markdownReport } from './report.js';
import type { TuneOutcome } from './tune.js';

export interface Written {
  files: string[];
  /** The config text, when one was chosen (printed when there is no output folder). */
  config?: string;
}

export async function writeOutputs(outcome: TuneOutcome, dir: string | undefined, modelDir?: string): Promise<Written> {
  const { report, config } = outcome;
  const text = config ? configText({ ...config, name: report.model }, report) : undefined;
  const files: string[] = [];
  if (dir !== undefined) {
    await mkdir(dir, { recursive: true });
    const put = async (name: string, content: string): Promise<void> => {
      await writeFile(join(dir, name), content);
      files.push(join(dir, name));
    };
    if (text !== undefined) await put('config.pbtxt', text);
    await put('report.md', markdownReport(report));
    await put('chart.svg', chartOf(report));
    await put('report.json', `${JSON.stringify(report, null, 2)}\n`);
  }
  if (modelDir !== undefined && text !== undefined) {
    await copyFile(join(modelDir, 'config.pbtxt'), join(modelDir, 'config.pbtxt.before-tune'));
    await writeFile(join(modelDir, 'config.pbtxt'), text);
    files.push(join(modelDir, 'config.pbtxt'));
    // The report beside the model, where a server's web console finds it (read-only: console/tune-report.ts).
    const json = join(modelDir, ...TUNE_REPORT_PATH);
    await mkdir(dirname(json), { recursive: true });
    await writeFile(json, `${JSON.stringify(report, null, 2)}\n`);
    await writeFile(join(dirname(json), 'report.md'), markdownReport(report));
    await writeFile(join(dirname(json), 'chart.svg'), chartOf(report));
    files.push(json);
  }
  return { files, config: text };
}
