/** What is wrong, and where: one entry of a SkiplockError's `issues` (a payload's path, a field). */
export interface ErrorIssue {
  path: (string | number)[];
  message: string;
}
