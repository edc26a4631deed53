import Foundation
import PinPolicy
import Testing
@testable import ProxyCore

/// Who holds a port pinproxy could not listen on, from the kernel's socket tables as Linux writes
/// them, and the hint each case gets.
@Suite struct PortHolderTests {
    /// Three sockets: a listener on 0.0.0.0:2024, an established connection whose local end is
    /// 127.0.0.1:41000 (0xA028), a TIME-WAIT one whose local end is 127.0.0.1:3128 (0x0C38).
    static let tcp = """
          sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
           0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 635 1 00000000eb606a4a 100 0 0 10 0
           1: 0100007F:A028 0100007F:07E8 01 00000000:00000000 00:00000000 00000000  1000        0 2289 1 000000005d456712 20 4 30 10 -1
           2: 0100007F:0C38 0100007F:1F90 06 00000000:00000000 03:00001562 00000000     0        0 0 3 0000000000000000
        """
    /// The IPv6 table: a listener on [::]:8443 (0x20FB).
    static let tcp6 = """
          sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
           0: 00000000000000000000000000000000:20FB 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 777 1 0000000000000000 100 0 0 10 0
        """

    @Test func theTablesSayWhoHoldsAPort() {
        #expect(PortHolder.holding(port: 2024, tables: [Self.tcp, Self.tcp6]) == .listener)
        #expect(PortHolder.holding(port: 8443, tables: [Self.tcp, Self.tcp6]) == .listener)
        #expect(PortHolder.holding(port: 41000, tables: [Self.tcp, Self.tcp6]) == .connection(state: "ESTABLISHED"))
        #expect(PortHolder.holding(port: 3128, tables: [Self.tcp, Self.tcp6]) == .connection(state: "TIME-WAIT"))
        #expect(PortHolder.holding(port: 9, tables: [Self.tcp, Self.tcp6]) == .unknown)
        #expect(PortHolder.holding(port: 9, tables: []) == .unknown)
    }

    /// The same local port in TIME-WAIT toward one peer and ESTABLISHED toward another (the kernel
    /// reuses ports so): the live connection is the one that holds it, in either order.
    @Test func aLiveConnectionIsNamedBeforeATimeWaitOne() {
        let timeWait = "   3: 0100007F:A028 0100007F:1F90 06 00000000:00000000 03:00001562 00000000     0        0 0 3 0000000000000000"
        let header = String(Self.tcp.split(separator: "\n")[0])
        #expect(PortHolder.holding(port: 41000, tables: [header + "\n" + timeWait, Self.tcp]) == .connection(state: "ESTABLISHED"))
        #expect(PortHolder.holding(port: 41000, tables: [Self.tcp + "\n" + timeWait]) == .connection(state: "ESTABLISHED"))
    }

    @Test func theEphemeralRangeIsReadAsTheKernelWritesIt() {
        #expect(PortHolder.parseRange("32768\t60999\n") == 32768...60999)
        #expect(PortHolder.parseRange("60999 32768") == nil)
        #expect(PortHolder.parseRange("") == nil)
    }

    @Test func eachHolderGetsItsOwnHint() {
        let address = SocketAddress.parse("127.0.0.1:41000")!
        #expect(PortHolder.listener.hint(for: address, ephemeral: 32768...60999)
                == "another process listens on 127.0.0.1:41000 (ss -ltnp 'sport = :41000' names it): stop it, or give pinproxy another address with --listen or proxy.listen")
        #expect(PortHolder.connection(state: "ESTABLISHED").hint(for: address, ephemeral: 32768...60999)
                == "no process listens on 127.0.0.1:41000, but a connection has its port as its own end (ESTABLISHED; ss -tanp 'sport = :41000' names the program): 41000 is in the kernel's ephemeral range 32768-60999 (net.ipv4.ip_local_port_range), from which every outgoing connection takes its local port, so any program may hold it again; give pinproxy a port outside that range with --listen or proxy.listen, or reserve this one (sysctl -w net.ipv4.ip_local_reserved_ports=41000)")
        #expect(PortHolder.connection(state: "TIME-WAIT").hint(for: address, ephemeral: 50000...60999)
                == "no process listens on 127.0.0.1:41000, but a connection has its port as its own end (TIME-WAIT; ss -tanp 'sport = :41000' names the program): end it, or give pinproxy another address with --listen or proxy.listen")
        #expect(PortHolder.unknown.hint(for: address, ephemeral: nil)
                == "something holds 127.0.0.1:41000: ss -tanp 'sport = :41000' names it (a program listening there, or a connection whose own end it is): stop it, or give pinproxy another address with --listen or proxy.listen")
    }
}
