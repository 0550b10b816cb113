'use strict';

// stringify({ q: 'cat', page: 2 }) -> 'q=cat&page=2'. An array repeats its key
// ({ tag: ['a', 'b'] } -> 'tag=a&tag=b'); `sort: true` orders the keys, so that equal
// objects give equal strings (cache keys).
function encode(value) {
  return encodeURIComponent(String(value));
}

function stringify(params, options = {}) {
  const keys = Object.keys(params);
  if (options.sort) keys.sort();
  const parts = [];
  for (const key of keys) {
    const values = Array.isArray(params[key]) ? params[key] : [params[key]];
    for (const value of values) {
      parts.push(`${encode(key)}=${encode(value)}`);
    }
  }
  return parts.join('&');
}

module.exports = { stringify };
