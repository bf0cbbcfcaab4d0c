import { skiplockRoutes } from '@/lib/skiplock';

export const maxDuration = 60;

export const { GET, POST, PUT, PATCH, DELETE } = skiplockRoutes;
