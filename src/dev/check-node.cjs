/*
 * Run by the npm scripts before their command, under the Node the script would use: on a Node
 * older than skiplock needs, one clear line and exit 1, instead of a stack trace or "bad option".
 * Plain ES5 on purpose (no const, no arrows, CommonJS): it must run on any Node, however old.
 * `npm install` puts Node 24 into node_modules/.bin (the `node` devDependency), and npm scripts
 * find it there first, so a machine whose own Node is 20 still runs them.
 */
'use strict';

var MIN = [22, 12];

function tooOld(version) {
  var parts = String(version).replace(/^v/, '').split('.');
  var major = Number(parts[0]);
  var minor = Number(parts[1]);
  return major < MIN[0] || (major === MIN[0] && minor < MIN[1]);
}

function message(version, nodeInstalledByNpm) {
  return 'skiplock needs Node >= ' + MIN.join('.') + ' (this is ' + String(version).replace(/^v/, '') + '): ' +
    (nodeInstalledByNpm
      ? 'run it through npm (`npm start`, `npm test`, `npm run ...` use the Node 24 in node_modules/.bin), or install Node 22.12 or later.'
      : 'run `npm install` first (it puts Node 24 into node_modules/.bin for the npm scripts), or install Node 22.12 or later.');
}

module.exports = { MIN: MIN, tooOld: tooOld, message: message };

if (require.main === module && tooOld(process.versions.node)) {
  var path = require('path');
  var fs = require('fs');
  var local = path.join(__dirname, '..', '..', 'node_modules', '.bin', 'node');
  console.error(message(process.versions.node, fs.existsSync(local)));
  process.exit(1);
}
