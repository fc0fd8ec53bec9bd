# The first command of a confined agent's sandbox when perl is there (see
# netrelay.py, netstart.relay_argv): it binds the relay's listeners on the
# sandbox's loopback, hands them (open, not close-on-exec) to the relay,
# started in a grandchild while the agent starts, and execs the agent. A
# connection made before the relay is up waits in the listener's backlog,
# so the agent never waits for the relay's interpreter: this script's start
# is a few milliseconds, Python's several times that. No module is loaded.
#
# perl netbind.pl [--bind ROLE FAMILY SOCKADDR_HEX]... [--env NAME=VALUE]...
#     [--through WORD]... [--relay WORD]... -- agent args...
# ROLE: `proxy`, `forward=host:port`, or `forward?=host:port` (an address
# this namespace may lack: skipped). The relay gets `--listening FD=ROLE`.
use strict;

$^F = 1023;    # the listeners stay open across the relay's exec
my (@binds, @env, @through, @relay);
while (@ARGV) {
    my $word = shift @ARGV;
    last if $word eq '--';
    if    ($word eq '--bind')    { push @binds, [ splice(@ARGV, 0, 3) ]; }
    elsif ($word eq '--env')     { push @env, shift @ARGV; }
    elsif ($word eq '--through') { push @through, shift @ARGV; }
    elsif ($word eq '--relay')   { push @relay, shift @ARGV; }
    else { print STDERR "corral's network relay: unknown option $word\n"; exit 126; }
}
my @agent = @ARGV;
if (!@agent || !@relay) { print STDERR "corral's network relay: nothing to run\n"; exit 126; }

my @open;
for my $bind (@binds) {
    my ($role, $family, $hex) = @$bind;
    my $sock;
    if (socket($sock, $family, 1, 0)    # SOCK_STREAM
        && setsockopt($sock, 1, 2, 1)   # SOL_SOCKET, SO_REUSEADDR
        && bind($sock, pack('H*', $hex))
        && listen($sock, 128))
    {
        push @open, $sock;
        my $plain = $role;
        $plain =~ s/^forward\?=/forward=/;
        push @relay, '--listening', fileno($sock) . "=$plain";
    }
    elsif ($role !~ /^forward\?=/) {
        print STDERR "corral's network relay: cannot listen for $role ($!)\n";
        exit 126;
    }
}

my $child = fork;
if (!defined $child) { print STDERR "corral's network relay: fork failed ($!)\n"; exit 126; }
if ($child == 0) {
    my $grandchild = fork;
    if (defined $grandchild && $grandchild == 0) {
        setpgrp(0, 0);    # out of the agent's foreground group: Ctrl-C is the agent's
        exec { $relay[0] } @relay;
        exit 1;
    }
    exit 0;
}
waitpid($child, 0);
close $_ for @open;
for my $pair (@env) {    # what the operator's environment held for perl itself
    my ($name, $value) = split /=/, $pair, 2;
    $ENV{$name} = $value;
}
my @run = (@through, @agent);
exec { $run[0] } @run;
print STDERR "$run[0]: $!\n";
exit($!{ENOENT} ? 127 : 126);
