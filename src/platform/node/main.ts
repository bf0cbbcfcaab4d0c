/** Kept for its path: the self-hosted Node runner is src/app/node.ts (built from the public entry points). */
import '../../app/node.ts';
