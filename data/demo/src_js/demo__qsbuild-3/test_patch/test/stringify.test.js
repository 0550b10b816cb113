'use strict';

const { test, describe } = require('node:test');
const assert = require('node:assert');
const { stringify } = require('../lib/stringify');

describe('stringify', () => {
  test('joins pairs with &', () => {
    assert.strictEqual(stringify({ q: 'cat', page: 2 }), 'q=cat&page=2');
  });

  test('repeats the key of an array and sorts keys when asked', () => {
    assert.strictEqual(stringify({ tag: ['a', 'b'] }), 'tag=a&tag=b');
    assert.strictEqual(stringify({ b: 1, a: 2 }, { sort: true }), 'a=2&b=1');
  });

  test('escapes spaces and percent signs', () => {
    assert.strictEqual(stringify({ q: '100% sure' }), 'q=100%25%20sure');
  });

  describe('reserved characters', () => {
    test('escapes & and = inside a value', () => {
      assert.strictEqual(stringify({ q: 'salt & pepper', page: 2 }), 'q=salt%20%26%20pepper&page=2');
      assert.strictEqual(stringify({ filter: 'a=b' }), 'filter=a%3Db');
    });

    test('escapes # and ? so that the value stays in the query', () => {
      assert.strictEqual(stringify({ ref: '#top' }), 'ref=%23top');
      assert.strictEqual(stringify({ next: 'list?page=2' }), 'next=list%3Fpage%3D2');
    });

    test('escapes keys too', () => {
      assert.strictEqual(stringify({ 'a&b': 1 }), 'a%26b=1');
    });
  });
});
