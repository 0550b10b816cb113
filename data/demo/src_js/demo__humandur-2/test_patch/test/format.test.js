'use strict';

const { test, describe } = require('node:test');
const assert = require('node:assert');
const { formatDuration } = require('../lib/format');

describe('formatDuration', () => {
  test('mixes units and leaves the zero ones out', () => {
    assert.strictEqual(formatDuration(5400000), '1h 30m');
    assert.strictEqual(formatDuration(93784000), '1d 2h 3m 4s');
  });

  test('keeps only the largest units asked for', () => {
    assert.strictEqual(formatDuration(93784000, { largest: 2 }), '1d 2h');
  });

  test('writes a minus sign before a negative duration', () => {
    assert.strictEqual(formatDuration(-90000), '-1m 30s');
  });

  test('writes a whole hour as 1h, not 60m', () => {
    assert.strictEqual(formatDuration(3600000), '1h');
    assert.strictEqual(formatDuration(7200000), '2h');
    assert.strictEqual(formatDuration(3660000), '1h 1m');
  });

  test('writes one minute as 1m and one second as 1s', () => {
    assert.strictEqual(formatDuration(60000), '1m');
    assert.strictEqual(formatDuration(1000), '1s');
    assert.strictEqual(formatDuration(1499), '1s');
  });

  test('keeps every unit when each is exactly one', () => {
    assert.strictEqual(formatDuration(90061000), '1d 1h 1m 1s');
  });
});
