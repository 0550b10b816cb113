'use strict';

const { test, describe } = require('node:test');
const assert = require('node:assert');
const { formatDuration } = require('../lib/format');
const { parseDuration } = require('../lib/parse');

describe('parseDuration', () => {
  test('adds up whole units with or without spaces', () => {
    assert.strictEqual(parseDuration('1h 30m'), 5400000);
    assert.strictEqual(parseDuration('1h30m'), 5400000);
    assert.strictEqual(parseDuration('250ms'), 250);
  });

  test('reads back what formatDuration writes', () => {
    assert.strictEqual(parseDuration(formatDuration(93784000)), 93784000);
  });

  test('rejects text without a duration', () => {
    assert.throws(() => parseDuration('soon'), /no duration/);
  });

  test('reads a fractional amount', () => {
    assert.strictEqual(parseDuration('1.5h'), 5400000);
    assert.strictEqual(parseDuration('2.25m'), 135000);
    assert.strictEqual(parseDuration('0.5s'), 500);
  });

  test('reads a fraction without a leading zero', () => {
    assert.strictEqual(parseDuration('.5s'), 500);
    assert.strictEqual(parseDuration('1h .5m'), 3630000);
  });
});
