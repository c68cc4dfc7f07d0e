"""The controller: elected through ZooKeeper, decides leaders and ISRs for the cluster."""
