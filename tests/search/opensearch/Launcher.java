import java.util.concurrent.CountDownLatch;

import org.codelibs.opensearch.runner.OpenSearchRunner;

/**
 * Starts one OpenSearch node for Weir's tests (see ../opensearch.sh) and keeps
 * the JVM alive until it is told to stop.
 *
 *   java -cp 'libs/*:launcher' Launcher BASE_DIR HTTP_PORT [key=value ...]
 *
 * The runner's own main() exits 1 without saying why when anything fails, so
 * this one prints the exception. Extra key=value arguments become node
 * settings (for example indexing_pressure.memory.limit=1kb).
 */
public final class Launcher {
    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: Launcher BASE_DIR HTTP_PORT [key=value ...]");
            System.exit(2);
        }
        String base = args[0];
        int port = Integer.parseInt(args[1]);

        OpenSearchRunner runner = new OpenSearchRunner();
        // Without this the runner refuses ports above 9299 and quietly picks
        // the next free port below that instead of the one asked for.
        runner.setMaxHttpPort(-1);
        runner.onBuild((number, settings) -> {
            settings.put("network.host", "127.0.0.1");
            settings.put("http.port", Integer.toString(port));
            // The transport port is only used inside the node; any free one will do.
            settings.put("transport.port", "9300-9400");
            settings.put("discovery.type", "single-node");
            // A test node on a nearly full disk must still accept writes.
            settings.put("cluster.routing.allocation.disk.threshold_enabled", "false");
            for (int i = 2; i < args.length; i++) {
                int eq = args[i].indexOf('=');
                if (eq <= 0) {
                    throw new IllegalArgumentException("not key=value: " + args[i]);
                }
                settings.put(args[i].substring(0, eq).trim(), args[i].substring(eq + 1).trim());
            }
        });

        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                runner.close();
            } catch (Exception e) {
                e.printStackTrace();
            }
            stopped.countDown();
        }));

        try {
            runner.build(OpenSearchRunner.newConfigs()
                    .basePath(base)
                    .numOfNode(1)
                    .clusterName("weir")
                    .pluginTypes("org.opensearch.knn.plugin.KNNPlugin")
                    .baseHttpPort(port - 1));
        } catch (Throwable e) {
            System.err.println("opensearch failed to start:");
            e.printStackTrace();
            System.exit(1);
        }
        System.out.println("opensearch node started on 127.0.0.1:" + port);
        // The node's threads are daemons: without this the JVM would exit now.
        stopped.await();
    }
}
