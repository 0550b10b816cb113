'use strict';

const { stringify } = require('./lib/stringify');
const { parse } = require('./lib/parse');

module.exports = { stringify, parse };
