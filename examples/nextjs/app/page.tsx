export default function Home() {
  return (
    <main>
      <h1>skiplock on Next.js</h1>
      <p>
        POST /api/signup enqueues a job; the queue's API and dashboard are at <a href="/api/skiplock/">/api/skiplock/</a>.
      </p>
      <p>
        <a href="/ask">/ask</a> streams an answer into the page while its job writes it.
      </p>
    </main>
  );
}
