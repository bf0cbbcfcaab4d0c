/** The login form: the API token, once, for a session cookie (session.ts). */
import { html } from 'hono/html';
import type { Html } from '../format.ts';

/** `failed`: true after a wrong token, or the message to show (a throttled attempt). */
export function loginBody(next: string, failed: boolean | string): Html {
  return html`<div class="login">
  <section class="card">
    <h1>skip<span>lock</span></h1>
    <p class="muted">Sign in with the API token (API_TOKEN) to see and operate the queue.</p>
    ${failed ? html`<div class="notice error" role="alert">${failed === true ? 'That is not the API token.' : failed}</div>` : ''}
    <form method="post" action="/login">
      <input type="hidden" name="next" value="${next}">
      <label>API token <input type="password" name="token" autocomplete="current-password" required autofocus></label>
      <button type="submit" class="primary">Sign in</button>
    </form>
  </section>
</div>`;
}
