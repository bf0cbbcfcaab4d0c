// Next 16's own declarations name URLPatternInput and URLPatternOptions, which TypeScript's DOM lib
// gains after 5.9 (@types/node already declares URLPatternInit). Needed only with skipLibCheck: false
// on TypeScript 5.9; delete it on a newer TypeScript.
type URLPatternInput = string | URLPatternInit;
interface URLPatternOptions {
  ignoreCase?: boolean;
}
