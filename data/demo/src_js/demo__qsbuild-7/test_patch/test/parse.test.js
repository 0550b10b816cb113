'use strict';

const { test, describe } = require('node:test');
const assert = require('node:assert');
const { parse } = require('../lib/parse');
const { stringify } = require('../lib/stringify');

describe('parse', () => {
  test('reads each pair as a string', () => {
    assert.deepStrictEqual(parse('q=cat&page=2'), { q: 'cat', page: '2' });
  });

  test('ignores a leading ? and reads + as a space', () => {
    assert.deepStrictEqual(parse('?q=salt+%26+pepper&empty'), { q: 'salt & pepper', empty: '' });
  });

  test('collects a repeated key into an array, in order', () => {
    assert.deepStrictEqual(parse('color=red&color=blue&color=green'), { color: ['red', 'blue', 'green'] });
  });

  test('reads back the arrays stringify writes', () => {
    const query = stringify({ tag: ['red', 'blue'], page: 1 });
    assert.deepStrictEqual(parse(query), { tag: ['red', 'blue'], page: '1' });
  });
});
