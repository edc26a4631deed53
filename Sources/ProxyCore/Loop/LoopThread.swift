import Foundation

/// A plain pthread that runs one closure: the closure crosses `pthread_create`'s C pointer as a
/// retained box, which the new thread takes back (and so releases) as it starts. A plain pthread
/// rather than Foundation's `Thread`, so its owner can join it.
enum LoopThread {
    /// Starts the thread; `stackSize` nil keeps the system's default.
    static func start(stackSize: Int? = nil, _ run: @escaping () -> Void) -> pthread_t {
        let body = Unmanaged.passRetained(Body(run))
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        if let stackSize { pthread_attr_setstacksize(&attributes, stackSize) }
        var id = pthread_t()
        let created = pthread_create(&id, &attributes, { context in
            guard let context else { preconditionFailure("thread started without its body") }
            Unmanaged<Body>.fromOpaque(context).takeRetainedValue().run()
            return nil
        }, body.toOpaque())
        precondition(created == 0, "pthread_create failed: \(errnoText(created))")
        return id
    }

    private final class Body {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }
}
