"""A test server's own asyncio loop on a daemon thread, beside the client under test (which runs its own loop)."""

import asyncio
import threading


class LoopThread:
    """``started()`` (a coroutine function returning the server) runs on the new loop before the thread starts, so
    a library that binds to the running loop (grpclib) binds to this one."""

    def __init__(self, started):
        self.loop = asyncio.new_event_loop()
        self.server = self.loop.run_until_complete(started())
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def stop(self):
        async def stopped():  # on the server's own loop: asyncio's server is not thread-safe
            self.server.close()
            await self.server.wait_closed()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stopped(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
